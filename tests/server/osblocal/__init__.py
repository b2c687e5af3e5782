"""osblocal: a local OpenSandbox-compatible server for the osbfs tests.

Modules, one purpose each:
  app          configuration, the sandbox table, persistence, timers
  lifecycle    the lifecycle API, server proxy and /_admin on the main port
  validation   FastAPI/pydantic style 422 errors
  sandbox      one sandbox: record, listener, processes, state
  execd        the per-sandbox execd listener and its routing
  files_api    execd's /files and /directories
  multipart    streaming multipart/form-data parsing
  commands_api execd's /command and /session
  code_api     execd's /code (persistent interpreters) and kernels/
  events       the execd event stream framing
  egress       the egress sidecar's /policy (stored, NOT enforced)
  sandboxfs    the sandbox's filesystem view and the path resolver
  pathutil     execd's $VAR / ~ / Abs path handling
  procs        bubblewrap, the spawner thread, process trees
  proxy        streaming HTTP forwarding
  faults       fault injection and request counting
  httpbase     HTTP/1.1 server and handler plumbing
  util         timestamps, ids, Go error texts, atomic writes
"""
