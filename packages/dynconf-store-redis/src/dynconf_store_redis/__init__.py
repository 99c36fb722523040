"""The redis store for dynconf: one string key, watched through keyspace notifications."""

from dynconf_store_redis.plugin import REDIS_STORE, RedisStoreType

__all__ = ["REDIS_STORE", "RedisStoreType"]
