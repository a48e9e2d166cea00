import sys

from graph_rma.cli import main

sys.exit(main())
