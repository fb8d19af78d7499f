/*-------------------------------------------------------------------------
 *
 * spi_host.h
 *	  The background worker as the runner's host (spi_host.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_SPI_HOST_H
#define REMORA_SPI_HOST_H

#include "remora.h"

#include "runner/runner.h"

extern void remora_spi_host_start(int slot, MemoryContext cxt,
								  const RemoraRunnerConfig *cfg);
extern void remora_spi_host_publish_progress(void);

#endif /* REMORA_SPI_HOST_H */
