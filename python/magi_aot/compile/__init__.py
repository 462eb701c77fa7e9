"""The torch.compile side: the save backend (backend: every region Dynamo
hands over saved into a cache directory, and with store_code its Inductor
code), the stored code (code: the COMPILED section written and loaded) and
the warm start (warm: a model's compiled forward from the cache, without
torch.compile). The cache directory itself is magi_aot.cache.

Importing this package needs no torch; the calls that do import it.
"""
