"""Two environments in one module, for ``app:tests.envs.two_envs:LongGame,ValidatorGated``."""

from tests.envs.long_game import LongGame
from tests.envs.validator_gated import ValidatorGated

__all__ = ["LongGame", "ValidatorGated"]
