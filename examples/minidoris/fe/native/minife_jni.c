/* minidoris FE JNI kernel: sums a byte array. */
#include <jni.h>

JNIEXPORT jlong JNICALL Java_org_apache_doris_minife_NativeKernel_checksum(JNIEnv *env, jclass cls, jbyteArray data) {
    (void)cls;
    jsize n = (*env)->GetArrayLength(env, data);
    jbyte *p = (*env)->GetByteArrayElements(env, data, NULL);
    jlong sum = 0;
    for (jsize i = 0; i < n; i++) sum += (unsigned char)p[i];
    (*env)->ReleaseByteArrayElements(env, data, p, JNI_ABORT);
    return sum;
}
