"""The etcd store for dynconf: one key through the v3 gRPC gateway, watched by its stream."""

from dynconf_store_etcd.plugin import ETCD_STORE, EtcdStoreType
from dynconf_store_etcd.remote import Etcd

__all__ = ["Etcd", "ETCD_STORE", "EtcdStoreType"]
