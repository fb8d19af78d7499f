/*-------------------------------------------------------------------------
 *
 * launcher.h
 *	  The remora launcher's registration, for module initialisation.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_LAUNCHER_H
#define REMORA_LAUNCHER_H

extern void remora_register_launcher(void);

#endif /* REMORA_LAUNCHER_H */
