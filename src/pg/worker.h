/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The remora launcher and worker background processes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_WORKER_H
#define REMORA_WORKER_H

extern void remora_register_launcher(void);

#endif /* REMORA_WORKER_H */
