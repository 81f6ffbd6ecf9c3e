"""The lease table's schema: every key and every item layout, in one place.

No other module spells a key prefix or an attribute name: :mod:`.keys` builds the keys,
:mod:`.values` the attribute values, and the ``*_items`` modules name each kind's attributes."""
