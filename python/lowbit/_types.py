"""Quant type ids and names, mirroring lowbit::QuantType in include/lowbit/quant_type.h."""

from __future__ import annotations

from enum import IntEnum


class QuantType(IntEnum):
    """Formats lowbit knows, numbered with ggml's type ids (GGUF types) or ids above 1000 (split MX)."""

    Q5_0 = 6
    Q8_0 = 8
    Q8_1 = 9  # activation format only
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    IQ1_M = 29
    MXFP4 = 39
    MXFP8_E4M3 = 1001
    MXFP4_SPLIT = 1002

    @property
    def type_name(self) -> str:
        """The lower-case name ggml uses ("iq2_xxs"), or lowbit's for split MX types."""
        return self.name.lower()


QTypeLike = QuantType | int | str

WEIGHT_TYPES: tuple[QuantType, ...] = tuple(t for t in QuantType if t is not QuantType.Q8_1)
GGUF_WEIGHT_TYPES: tuple[QuantType, ...] = tuple(t for t in WEIGHT_TYPES if t < 1000)
SPLIT_MX_TYPES: tuple[QuantType, ...] = (QuantType.MXFP8_E4M3, QuantType.MXFP4_SPLIT)


def as_quant_type(qtype: QTypeLike, arg: str = "qtype") -> QuantType:
    """Accepts a QuantType, its lower-case name ("iq2_xxs") or its integer id."""
    if isinstance(qtype, QuantType):
        return qtype
    if isinstance(qtype, bool):
        raise TypeError(f"{arg}: expected a QuantType, name or int id, got bool")
    if isinstance(qtype, int):
        try:
            return QuantType(qtype)
        except ValueError:
            raise ValueError(f"{arg}: {qtype} is not a quant type id lowbit knows") from None
    if isinstance(qtype, str):
        try:
            return QuantType[qtype.upper()]
        except KeyError:
            known = ", ".join(t.type_name for t in QuantType)
            raise ValueError(f"{arg}: unknown quant type name {qtype!r} (known: {known})") from None
    raise TypeError(f"{arg}: expected a QuantType, name or int id, got {type(qtype).__name__}")


_LAYOUTS: dict[QuantType, tuple[int, int]] = {}


def block_layout(qtype: QTypeLike, arg: str = "qtype") -> tuple[int, int]:
    """(elements, bytes) of one block of `qtype` (bytes of the elements tensor for split MX types),
    read from the C++ core's type table, the one definition of the formats."""
    if not _LAYOUTS:
        from . import _C

        for t in _C.types():
            _LAYOUTS[QuantType(t["id"])] = (t["block_elems"], t["block_bytes"])
    return _LAYOUTS[as_quant_type(qtype, arg)]
