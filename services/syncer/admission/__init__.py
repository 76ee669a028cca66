"""The validating admission webhook (`pyngress webhook`): an Ingress is judged before it is stored, by the
syncer's own model, so that it lives in the syncer's package (a process package imports no other).

review.py decides (Reviewer: the watcher's store in, a Verdict per Ingress out; pure, as model/ is); the
server modules beside it answer the API server's AdmissionReview over HTTPS with it. `pyngress lint`
(services/tools/lint.py) runs the same Reviewer over manifests.
"""
