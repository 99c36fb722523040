"""dynconf: layered, typed, live configuration from files, the environment and remote stores."""

from dynconf.errors import (
    AuthError,
    BackendError,
    DynconfError,
    EnvError,
    ErrorKind,
    InvalidError,
    IoError,
    MissingError,
    NotInitialisedError,
    Origin,
    ParseError,
    RemoteError,
    TypeMismatchError,
)

__version__ = "0.1.0"

__all__ = [
    "AuthError",
    "BackendError",
    "DynconfError",
    "EnvError",
    "ErrorKind",
    "InvalidError",
    "IoError",
    "MissingError",
    "NotInitialisedError",
    "Origin",
    "ParseError",
    "RemoteError",
    "TypeMismatchError",
    "__version__",
]
