"""One-machine development: DEBUG on unless DEBUG says otherwise."""

from kernelevolve_site.settings.base import *  # noqa: F403
from kernelevolve_site.settings.base import env_bool

DEBUG = env_bool("DEBUG", True)
