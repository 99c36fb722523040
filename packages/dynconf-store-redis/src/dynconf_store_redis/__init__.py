"""The redis store for dynconf: one string key, watched through keyspace notifications."""

from dynconf_store_redis.plugin import REDIS_STORE, RedisStoreType
from dynconf_store_redis.remote import Redis

__all__ = ["Redis", "REDIS_STORE", "RedisStoreType"]
