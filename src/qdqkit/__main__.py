import sys

from qdqkit.cli import main

sys.exit(main())
