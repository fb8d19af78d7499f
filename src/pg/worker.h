/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The remora launcher's registration, for module initialisation.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_WORKER_H
#define REMORA_WORKER_H

extern void remora_register_launcher(void);

#endif /* REMORA_WORKER_H */
