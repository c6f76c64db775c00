"""``python -m responses_gateway.lambda_runtime module:app``: see :mod:`.main`."""

from responses_gateway.lambda_runtime.main import main

raise SystemExit(main())
