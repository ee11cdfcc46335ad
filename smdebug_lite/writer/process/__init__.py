"""The background writer process and the protocol between it and the training process.

Training-process side: `lifecycle` (which writer process, started on first use, replaced after
a death), `handle.WriterProcess` (messages, acknowledgements, shared memory) and
`trial_writer.ProcessTrialWriter` (one out_dir written through it). Between the two processes:
`channel` (pickled messages and file descriptors over a Unix socket), `ack_board` (a shared
page: steps written one way, repeat steps the other) and `shared_arena` (memfd segments the
snapshots live in). Writer-process side: `main`, its program.
"""
