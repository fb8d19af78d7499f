/*
 * wait.h: how long a unit test waits on an engine, a thread or a socket.
 */
#ifndef REMORA_UNIT_WAIT_H
#define REMORA_UNIT_WAIT_H

/*
 * How long a test waits on an engine, a thread or a socket before it gives
 * up, in wall-clock milliseconds.  A count of turns is no bound: on a busy
 * machine (the suite runs these at nice 19 beside its e2e lanes) turns
 * can return at once, many in a row, while the store's thread waits for a
 * core: reuse_resume_test, 0.5 s of CPU, took 84 s here at nice 19
 * beside four busy loops.  The engines of tests that need no stall to
 * fire take it as their stall and connect timeouts too: in the suite's
 * full runs, 30 s of them failed a checkpoint now and then.
 */
#define UNIT_WAIT_MS (300 * 1000)

#endif
