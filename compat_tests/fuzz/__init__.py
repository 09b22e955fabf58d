"""Fuzzing the broker with mutated golden frames.

- ``capture.py`` records the request frames real clients send to a real broker (a recording proxy in
  front of a ``BrokerProcess``) and writes them to ``corpus.json``, the golden frames;
- ``corpus.py`` loads them;
- ``mutate.py`` turns a golden frame and a seed into a mutated frame, deterministically;
- ``campaign.py`` runs a fuzz campaign against a broker process: mutated frames on their own
  connections while a served client produces and consumes and a probe times Metadata requests.

``compat_tests/test_fuzz.py`` runs a short campaign; ``python -m bench.fuzz`` runs a long one.
"""
