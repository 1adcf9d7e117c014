"""`python -m lceval.launch JOB SHARD --attempt K`: one shard of a launch (see _worker)."""

import sys

from lceval.launch._worker import main

if __name__ == "__main__":
    sys.exit(main())
