"""The code that runs *inside* the sandbox's test process, under the repository's interpreter.

Standard library only: the repository's environment does not contain swemill, so this
package is bound read-only into the sandbox (``/opt/swemill/swemill_inside``) and started by
its ``__main__.py``, which loads it under its own name without putting anything on
``sys.path`` (a test forbids importing the rest of swemill from here). On the host it is an
ordinary package: the client imports :mod:`.protocol`, tests import the rest.

Modules, each one subsystem:

- :mod:`.protocol`: the typed, versioned request and reply records (one ``op`` each) and
  the switches (:class:`~.protocol.Flags`) that turn each optimisation off;
- :mod:`.serve_loop`: the warm server's loop (warm-up, dispatch);
- :mod:`.forkrun`: fork a child per request and run pytest in it, under deadlines;
- :mod:`.codecache`: compiled and assertion-rewritten code keyed by exact source bytes;
- :mod:`.report_cache`: parsed modules for pytest's failure reports, keyed by exact text;
- :mod:`.stmt_lines`: a tree's statement lines worked out once (pytest < 9 walks it per line);
- :mod:`.image`: the head image (collect the suite once, serve forks of it);
- :mod:`.hotpatch`: swap edited function bodies into the image's live functions;
- :mod:`.grade`: the grading server (a fork per grading run, nothing of it left behind);
- :mod:`.fresh`: what a fork must be given to start and end as a fresh interpreter does;
- :mod:`.pristine_codes`: the grading server's compiled code of the pristine tree.

Supported pytest: :data:`PYTEST_LOWEST` and on (tested with the lowest and the newest).
"""

PYTEST_LOWEST = "7.4"
"""The oldest pytest the server's hooks are tested with (``tests/validate/test_inside_pytest``)."""
