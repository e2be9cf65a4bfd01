"""Build, remove or show the mypyc-compiled core: at-most-once receiver, RPC and frame
codec (``timebound._compiled``).

    .venv/bin/python scripts/compile_core.py build|clean|status
"""

from timebound._compiled import main

if __name__ == "__main__":
    raise SystemExit(main())
