"""The numerics a run started with: two runs with different numerics are not compared without
saying so (a script's result, its benchmark, the history's runs)."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from jaxrun.results.base_model import MappingModel


class Numerics(MappingModel):
    """The numerics a script started with (jaxrun's options and the user's own JAX_* / XLA_FLAGS):
    two runs with different numerics are not compared without saying so."""

    x64: Annotated[bool, Meta(description="jax_enable_x64")] = False
    matmul_precision: Annotated[str | None, Meta(description=(
        "jax_default_matmul_precision (null: JAX's default)"
    ))] = None
    debug_nans: bool = False
    debug_infs: bool = False
    disable_jit: bool = False
    xla_flags: Annotated[str | None, Meta(description=(
        "XLA_FLAGS, without the placement flags jaxrun adds itself"
    ))] = None

    def differences(self, other: "Numerics") -> list[str]:
        """``["x64 False vs True", ...]``: the settings where ``other`` differs from this one."""
        return [f"{name} {getattr(self, name)!r} vs {getattr(other, name)!r}"
                for name in type(self).model_fields if getattr(self, name) != getattr(other, name)]
