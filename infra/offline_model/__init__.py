"""The offline model: an OpenAI-compatible HTTP server that plays scripted scenarios.

It is not a language model and says so: /v1/models names it `scripted-offline-model`.
It exists so the demo and the tests run on a machine with no model and no network.
"""
