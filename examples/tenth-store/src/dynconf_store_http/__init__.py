"""dynconf-store-http: a worked example of a tenth store.

One document at a plain HTTP(S) URL, read with ``GET`` and watched with conditional ``GET``
(``If-None-Match`` / ``If-Modified-Since``), so an unchanged document costs a 304 and no body.
The whole client is the standard library; see ``docs/tenth-store.md`` for the walkthrough.
"""

from dynconf_store_http.plugin import HTTP_STORE, HttpStoreType

__all__ = ["HTTP_STORE", "HttpStoreType"]
