package org.apache.doris.minife;

/** minidoris FE: prints its version, and with --native calls the optional JNI kernel. */
public final class Main {
    private Main() {}

    public static void main(String[] args) {
        System.out.println("minidoris fe " + Version.VERSION);
        if (args.length > 0 && args[0].equals("--native")) {
            System.out.println("native checksum " + NativeKernel.checksum(new byte[] {1, 2, 3}));
        }
    }
}
