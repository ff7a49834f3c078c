"""One resolved target: the platform, the language (or None: the platform's default applies) and
the torch device, looked up once by name and passed down (the driver side never looks a platform
up again; the sandboxed worker, a process of its own, resolves its job's platform by name).

`resolve` is where an unknown name or a language the platform does not run becomes a one-line
error (errors.PlatformError).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from kernelevolve.errors import PlatformError
from kernelevolve.languages.base import Language
from kernelevolve.platforms.base import Platform


@dataclass(frozen=True)
class Target:
    platform: Platform
    language: Optional[Language]
    device: str

    @property
    def name(self) -> str:
        """The platform's name (what travels to the worker and into the store)."""
        return self.platform.name

    @property
    def language_name(self) -> str:
        """The language asked for, else the platform's default."""
        return self.language.name if self.language else self.platform.default_language


def resolve(platform: str, language: Optional[str] = None) -> Target:
    """The Target for a platform name and an optional language name (one-line errors)."""
    from kernelevolve.plugins import get_language, get_platform

    plat = get_platform(platform)
    lang = None
    if language is not None:
        lang = get_language(language)
        if lang.name not in plat.languages:
            raise PlatformError(f"language {language!r} does not run on the {plat.name} "
                                f"platform; it runs {', '.join(plat.languages)}")
    return Target(plat, lang, plat.device)


TargetLike = Union[Target, str]


def as_target(target: TargetLike) -> Target:
    """A Target as it is, a platform name resolved (for callers that still pass names)."""
    return target if isinstance(target, Target) else resolve(target)


def platform_of(target: Union[Target, Platform, str]) -> Platform:
    """The Platform of a Target, a Platform, or a name."""
    if isinstance(target, Platform):
        return target
    return as_target(target).platform
