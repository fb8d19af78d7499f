/*-------------------------------------------------------------------------
 *
 * metricsd.h
 *	  The background worker "remora metrics", as module initialisation
 *	  sees it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_METRICSD_H
#define REMORA_METRICSD_H

extern char *remora_metrics_listen;

/* Define remora.metrics_listen (before remora_define_gucs reserves the
 * prefix). */
extern void remora_metrics_define_gucs(void);

/* Register the worker if remora.metrics_listen is set. */
extern void remora_register_metrics(void);

#endif /* REMORA_METRICSD_H */
