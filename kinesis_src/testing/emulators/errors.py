"""Errors the emulator kit raises on purpose; each message names the thing and the fix."""

from __future__ import annotations


class LauncherError(RuntimeError):
    """Base class for every error the emulator kit raises on purpose."""


class ToolMissingError(LauncherError):
    """A required executable (node, npm, java) is not installed."""


class InstallError(LauncherError):
    """``npm ci`` / ``npm install`` of the pinned emulators failed."""


class ServerStartError(LauncherError):
    """A server exited early or did not become ready before the deadline."""
