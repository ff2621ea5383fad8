/*
 * lensemble-verify verify-oms and sign-oms: OpenSSF Model Signing bundles
 * from the command line (docs/OMS.md).
 */
#ifndef LENSEMBLE_VERIFY_OMS_H
#define LENSEMBLE_VERIFY_OMS_H

extern const char oms_usage_text[];

int cmd_verify_oms(int argc, char **argv);
int cmd_sign_oms(int argc, char **argv);

#endif
