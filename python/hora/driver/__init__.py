"""What hora.spark and hora.ray share: a job whose ranks an engine (Spark, Ray) starts in its own
tasks, meeting at a hora rendezvous the driver holds.

- ``_rendezvous`` (C++): hora's rendezvous server (rendezvous/server.h) on a thread of the driver.
- ``ranks``: rank, local and cross numbers from the hosts the engine placed the tasks on, and the
  environment of docs/environment.md that horarun would have given each rank.
- ``job`` (driver side): the rendezvous, the control port the tasks and ranks report to, output
  prefixed as horarun prefixes it, and the failure handling (the first failing rank is named, the
  others aborted).
- ``task`` (engine side): runs one rank as a child process of the engine's task and supervises it.
- ``_rank``: that child.

docs/spark.md and docs/ray.md describe the whole.
"""
