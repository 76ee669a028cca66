"""What the Gateway status writer sends (ingress_status/gateway_status.py): lastTransitionTime kept while a condition
holds, and other controllers' entries of a route's status.parents kept as they are."""
from services.syncer.ingress_status.gateway_status import merged_parents, stamped, stamped_status

OURS = "pyngress.io/gateway-controller"


def accepted(status: str, reason: str = "Accepted", generation: int = 1) -> dict:
    return {"type": "Accepted", "status": status, "reason": reason, "message": "m", "observedGeneration": generation}


def test_a_condition_keeps_its_transition_time_while_its_status_holds():
    shown = [{**accepted("True", generation=1), "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    assert stamped([accepted("True", generation=2)], shown, "NOW") == [
        {**accepted("True", generation=2), "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    assert stamped([accepted("False", "NoMatchingParent")], shown, "NOW")[0]["lastTransitionTime"] == "NOW"
    assert stamped([accepted("True")], None, "NOW")[0]["lastTransitionTime"] == "NOW"


def test_a_listener_keeps_its_conditions_transition_times_by_name():
    shown = {"conditions": [], "listeners": [
        {"name": "http", "conditions": [{**accepted("True"), "lastTransitionTime": "THEN"}]}]}
    wanted = {"conditions": [accepted("True")], "listeners": [{"name": "http", "conditions": [accepted("True")]},
                                                              {"name": "new", "conditions": [accepted("True")]}]}
    status = stamped_status(wanted, shown, "NOW")
    assert [listener["conditions"][0]["lastTransitionTime"] for listener in status["listeners"]] == ["THEN", "NOW"]


def test_other_controllers_parent_entries_are_kept_and_ours_replaced():
    theirs = {"parentRef": {"name": "gw"}, "controllerName": "example.com/other",
              "conditions": [{**accepted("False"), "lastTransitionTime": "THEN"}]}
    our_old = {"parentRef": {"name": "gone"}, "controllerName": OURS, "conditions": []}
    ours = [{"parentRef": {"name": "gw"}, "controllerName": OURS, "conditions": [accepted("True")]}]
    assert merged_parents(ours, [theirs, our_old], controller=OURS, now="NOW") == [
        theirs, {**ours[0], "conditions": [{**accepted("True"), "lastTransitionTime": "NOW"}]}]
    assert merged_parents([], [theirs, our_old], controller=OURS, now="NOW") == [theirs]
