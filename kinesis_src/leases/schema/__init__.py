"""The lease table's schema: every key and every item layout, in one place.

:mod:`.keys` builds every partition and sort key (and lists the item kinds
docs/leases.md documents); :mod:`.values` writes and checks attribute values;
:mod:`.lease_items`, :mod:`.batch_items` and :mod:`.consumer_items` name the
attributes of each kind of item and convert items to values and back. No
other module spells a key prefix or an attribute name.
"""
