"""RLark settings: one module per concern, all configured from the environment."""

from .api import *  # noqa: F403
from .base import *  # noqa: F403
from .database import *  # noqa: F403
from .notifications import *  # noqa: F403
from .observability import *  # noqa: F403
from .security import *  # noqa: F403
from .sso import *  # noqa: F403
from .tasks import *  # noqa: F403
