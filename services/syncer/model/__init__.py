"""The model: the object store in, the Model out (types.py), with the problems found on the way.

Pure: no network, no processes, no Kubernetes API, no logging and no files written; what reaches nginx is
decided here and carried out by nginx_apply. Whether a Secret's PEM loads is asked of the OpenSSL that nginx
links through one door, openssl.py: content in, verdict out. tests/unit/test_layers.py holds these rules.
Start at build.py (build_model, a whole store) or incremental.py (IncrementalModel, object by object);
annotations/ parses each Ingress's annotations for it.
"""
