"""The model: the object store in, the Model out (types.py), with the problems found on the way.

Pure: no network, no processes, no Kubernetes API, no logging and no files written; what reaches nginx is
decided here and carried out by nginx_apply. Validating a Secret asks the OpenSSL that nginx links (tls.py,
backend_tls.py, dh_param.py), content in and verdict out. tests/unit/test_layers.py holds these rules.
Start at build.py (build_model, a whole store) or incremental.py (IncrementalModel, object by object);
annotations/ parses each Ingress's annotations for it.
"""
