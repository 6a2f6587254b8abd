"""Start the warm server: ``python -u .../inside/__main__.py WORKDIR [--off flag,...]``, or the
grading server (:mod:`.grade`): ``python -u .../inside/__main__.py --grade WORKDIR``.

Run as a script inside the sandbox, where swemill is not installed: the package is loaded
from this file's folder under its own name (``swemill_inside``), so its modules import one
another relatively, and nothing of it is left on ``sys.path`` to shadow the project's modules.
"""

import os
import sys

sys.dont_write_bytecode = True  # a stale .pyc from one candidate must never serve another


def _package() -> str:
    """The name this package is importable as, loading it by path when run as a script."""
    if __package__:
        return __package__
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "swemill_inside", os.path.join(here, "__init__.py"), submodule_search_locations=[here])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["swemill_inside"] = module
    spec.loader.exec_module(module)
    return "swemill_inside"


if __name__ == "__main__":
    import importlib

    grading = sys.argv[1:2] == ["--grade"]
    module = importlib.import_module(f"{_package()}.{'grade' if grading else 'serve_loop'}")
    module.main(sys.argv[2:] if grading else sys.argv[1:])
