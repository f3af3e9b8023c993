"""A game's envs split over worker processes: one worker abstraction, two transports.

A :class:`~games.workers.vec.WorkerVecGame` is the :class:`~games.core.VecGame` the trainer
sees; each worker builds its range of the envs from a :class:`~games.workers.host.WorkerRecipe`
(:class:`~games.workers.host.GameHost`) and answers the same commands whatever carries them:

- :mod:`games.workers.local`: spawned processes on this machine, arrays through shared memory
  (the default);
- :mod:`games.workers.ray_workers`: Ray actors on a local Ray instance or a cluster
  (``distributed.backend: ray``, ``pip install 'selfplay[ray]'``).
"""
