"""Every side effect lives here: the model call, the tools, and the stores behind them."""
