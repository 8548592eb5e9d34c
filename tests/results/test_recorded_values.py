"""What a script records stays what it recorded: NaN and infinities are not turned into null (which
means "not measured"), in the returned result or in the result files (as JSON strings)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from helpers import write

import jaxrun


def test_nan_and_infinity_survive_recording(tmp_path: Path) -> None:
    script = write(tmp_path, "s.py", """\
        import jaxrun
        jaxrun.record(loss=float("nan"), grad_norm=float("inf"), floor=float("-inf"), steps=3, none=None)
    """)
    result = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "r", compile_cache=False)
    assert result.success, result.error_message
    assert math.isnan(result.results["loss"]) and result.results["grad_norm"] == math.inf
    assert result.results["floor"] == -math.inf and result.results["steps"] == 3 and result.results["none"] is None
    saved = json.loads((tmp_path / "r" / "script_results" / "s_result.json").read_text())["results"]
    assert saved == {"loss": "NaN", "grad_norm": "Infinity", "floor": "-Infinity", "steps": 3, "none": None}
