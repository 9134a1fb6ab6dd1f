package org.apache.doris.minife;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/** Loads libminife_jni.so from the jar, snappy-java style: native/linux-<arch>/. */
public final class NativeKernel {
    private NativeKernel() {}

    static {
        String arch = System.getProperty("os.arch").equals("amd64") ? "x86_64" : System.getProperty("os.arch");
        String resource = "/native/linux-" + arch + "/libminife_jni.so";
        try (InputStream in = NativeKernel.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new UnsatisfiedLinkError("no " + resource + " in the jar");
            }
            Path tmp = Files.createTempFile("minife_jni", ".so");
            Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
            System.load(tmp.toString());
        } catch (IOException e) {
            throw new UnsatisfiedLinkError(e.toString());
        }
    }

    /** Sum of the bytes, computed in C. */
    public static native long checksum(byte[] data);
}
