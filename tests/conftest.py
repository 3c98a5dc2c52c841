import os

from orsbench import protocol  # constants only: imports nothing of the SDK

os.environ.setdefault(protocol.ENV_DISABLE_UPDATE_CHECK, "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
