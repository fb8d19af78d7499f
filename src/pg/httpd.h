/*-------------------------------------------------------------------------
 *
 * httpd.h
 *	  The background worker "remora http", as module initialisation sees it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_HTTPD_H
#define REMORA_HTTPD_H

extern char *remora_http_listen;

/* Define remora.http_* (before remora_define_gucs reserves the prefix). */
extern void remora_http_define_gucs(void);

/* Register the worker if remora.http_listen is set. */
extern void remora_register_http(void);

#endif /* REMORA_HTTPD_H */
