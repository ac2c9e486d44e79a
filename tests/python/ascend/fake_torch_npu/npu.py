"""``torch_npu.npu``: the device queries the backend's probe uses, answered from the emulator state."""

from __future__ import annotations

from ._state import STATE


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def get_device_name(device: object = None) -> str:
    return STATE.device_name


def get_soc_version() -> int:
    return STATE.soc_version
