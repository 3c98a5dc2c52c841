import sys

from orsbench.cli import main

sys.exit(main())
