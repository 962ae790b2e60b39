"""gRPC stubs generated from proto/reqstate/v1/reqstate.proto by grpcio-tools.

Do not edit: regenerate with `python clients/python/generate.py`
(tests/test_stubs.py fails when these files are stale).
"""
