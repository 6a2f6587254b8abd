"""Record columns built from buffers (no pandas import) equal what ``pa.array`` builds."""

from __future__ import annotations

import random
import subprocess
import sys

import pyarrow as pa
import pytest

from swemill.store.arrays import build_array


def _values(rng: random.Random, make: object, n: int) -> list[object]:
    return [None if rng.random() < 0.2 else make() for _ in range(n)]  # type: ignore[operator]


@pytest.mark.parametrize("seed", range(5))
def test_built_arrays_equal_pa_array(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(0, 40)
    word = lambda: "".join(rng.choice("aé\u20ac\U0001f600z ") for _ in range(rng.randint(0, 6)))  # noqa: E731
    cases = [
        (pa.string(), _values(rng, word, n)),
        (pa.int64(), _values(rng, lambda: rng.randint(-2**63, 2**63 - 1), n)),
        (pa.float64(), _values(rng, lambda: rng.choice([rng.random(), rng.randint(-5, 5)]), n)),
        (pa.bool_(), _values(rng, lambda: rng.random() < 0.5, n)),
        (pa.list_(pa.string()), _values(rng, lambda: _values(rng, word, rng.randint(0, 4)), n)),
        (pa.list_(pa.int64()), _values(rng, lambda: [rng.randint(0, 9)] * rng.randint(0, 3), n)),
    ]
    for kind, values in cases:
        built = build_array(values, kind)
        assert built is not None and built.type == kind
        built.validate(full=True)
        assert built.equals(pa.array(values, type=kind)), kind
        assert built.to_pylist() == values


def test_values_it_cannot_build_are_left_to_pa_array() -> None:
    assert build_array([1.5], pa.int64()) is None
    assert build_array(["1"], pa.int64()) is None
    assert build_array([2**64], pa.int64()) is None
    assert build_array([{"a": 1}], pa.struct([("a", pa.int64())])) is None


def test_invalid_utf8_bytes_are_refused() -> None:
    with pytest.raises(pa.ArrowInvalid):
        build_array([b"ok", b"\xff\xfe"], pa.string())


def test_writing_records_does_not_import_pandas(tmp_path: object) -> None:
    code = (
        "import sys\n"
        "from swemill.core.records import Trajectory, Message, TextBlock\n"
        "from swemill.store import Store\n"
        f"s = Store.open({str(tmp_path)!r})\n"
        "t = Trajectory(trajectory_id='t', source='x', policy='p',\n"
        "               messages=[Message(role='user', content=[TextBlock(text='hi')])])\n"
        "s.write_records('trajectories', 'r', '00000', [t, t])\n"
        "assert s.read_records('trajectories', 'r', Trajectory) == [t, t]\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
