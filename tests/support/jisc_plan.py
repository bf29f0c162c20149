"""The three-way JISC join plan of the Spark daemon test, reused by the controller's join-order tests."""

W_MS = 5_000
STREAMS = ("a", "b", "c")

PLAN = {
    "streams": {"a": {"rate": 2, "g": 1, "size": 100}, "b": {"rate": 2, "g": 1, "size": 100}, "c": {"rate": 8, "g": 1, "size": 100}},
    "queries": {
        "triple": {"op": "join", "id": "t_j2", "sel": 0.2, "inputs": [
            {"op": "join", "id": "t_j1", "sel": 0.2, "inputs": [
                {"op": "window", "id": "t_wa", "w": 5, "inputs": [{"op": "source", "stream": "a"}]},
                {"op": "window", "id": "t_wc", "w": 5, "inputs": [{"op": "source", "stream": "c"}]}]},
            {"op": "window", "id": "t_wb", "w": 5, "inputs": [{"op": "source", "stream": "b"}]}]},
    },
}


def first_pair(order) -> set[str]:
    while not isinstance(order[0], str):
        order = order[0]
    return set(order)
