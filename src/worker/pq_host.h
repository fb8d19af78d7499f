/*-------------------------------------------------------------------------
 *
 * pq_host.h
 *	  remora-worker as the runner's host (pq_host.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_WORKER_PQ_HOST_H
#define REMORA_WORKER_PQ_HOST_H

#include "runner/host.h"
#include "worker/conn.h"
#include "worker/settings.h"

typedef struct PqHost
{
	RemoraConn                 *conn;
	const RemoraWorkerSettings *settings;
} PqHost;

extern const RemoraHostOps remora_pq_host_ops;

#endif /* REMORA_WORKER_PQ_HOST_H */
