from graph_rma.cli import main
import sys
sys.exit(main())
